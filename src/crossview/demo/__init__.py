"""``crossview demo``: a local web page (Gradio, ``pip install "crossview[demo]"``) that runs the
bundled models on the user's own images, offline.

Three tabs, each a handler module that calls :mod:`crossview.api` and answers a bad input in
the page with crossview's own message (:mod:`crossview.demo.errors`):

- Stereo (:mod:`crossview.demo.stereo`): a pair, or the sample pair, with optional
  rectification of photographs taken by hand; the colourised disparity as ``crossview stereo``
  draws it, the confidence, and with a calibration the metric depth and a 3D point cloud.
- Flow (:mod:`crossview.demo.flow`): two frames or the first two of a short video; the flow
  picture with its colour wheel.
- Matching (:mod:`crossview.demo.matching`): click points on a source image, see them
  transferred onto a target image (TransforMatcher).

The page itself is :mod:`crossview.demo.app`. Gradio's usage statistics are off (set here,
before Gradio is imported), and nothing in the page is fetched from the network.
"""

from __future__ import annotations

import os

# read by Gradio when it is imported and when a page is built: no usage statistics, no version
# check (the demo runs offline)
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
