"""Copy a run's final weights to the bundled file with the history metadata updated."""
import json, sys
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from pathlib import Path

run = Path(sys.argv[1])
bundled = Path("src/crossview/models/weights/transformatcher_lite0.safetensors")
old = safe_open(str(run / "init.safetensors"), "pt").metadata()
new_meta = safe_open(str(run / "final.safetensors"), "pt").metadata()
total = int(new_meta["steps"])
added = total  # the run counted its own steps from 0 (started from init)
meta = dict(old)
meta["steps"] = str(int(old["steps"]) + added)
meta["history"] = old["history"] + " + " + sys.argv[2]
tensors = load_file(str(run / "final.safetensors"))
tmp = bundled.with_name(bundled.name + ".tmp")
save_file(tensors, str(tmp), metadata=meta)
tmp.replace(bundled)
print(meta)
