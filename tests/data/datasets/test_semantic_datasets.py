from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import scipy.io

from crossview.data import io
from crossview.data.datasets import open_dataset
from crossview.data.datasets.pfpascal import PFPascal
from crossview.data.datasets.pfwillow import PFWillow
from crossview.data.datasets.spair import SPair71k
from crossview.errors import UserError
from pfwillow_files import keypoint_text, write_pfwillow_folder


def _spair_tree(root: Path, write_image) -> dict:
    pair = "000001-2008_000008-2008_000075:aeroplane"
    (root / "Layout" / "large").mkdir(parents=True)
    (root / "Layout" / "large" / "test.txt").write_text(pair + "\n")
    src = write_image(root / "JPEGImages" / "aeroplane" / "2008_000008.jpg", (12, 16))
    ann = {"pair_id": 1, "src_imname": "2008_000008.jpg", "trg_imname": "2008_000075.jpg",
           "category": "aeroplane", "src_kps": [[1, 2], [5, 6], [9, 3]],
           "trg_kps": [[4, 4], [7, 8], [10, 1]], "src_bndbox": [0, 1, 15, 11],
           "trg_bndbox": [2, 2, 9, 10], "kps_ids": [0, 3, 7], "viewpoint_variation": 0}
    tgt = write_image(root / "JPEGImages" / "aeroplane" / "2008_000075.jpg", (10, 14))
    (root / "PairAnnotation" / "test").mkdir(parents=True)
    (root / "PairAnnotation" / "test" / f"{pair}.json").write_text(json.dumps(ann))
    return {"pair": pair, "ann": ann, "src": src, "tgt": tgt}


def test_spair71k_reads_the_release_layout(tmp_path: Path, write_image) -> None:
    tree = _spair_tree(tmp_path / "SPair-71k", write_image)
    data = SPair71k(tmp_path / "SPair-71k", split="test")
    assert len(data) == 1
    sample = data[0]
    assert sample["name"] == tree["pair"] and sample["category"] == "aeroplane"
    assert sample["image0"].shape == (12, 16, 3) and sample["image1"].shape == (10, 14, 3)
    np.testing.assert_array_equal(sample["keypoints0"], tree["ann"]["src_kps"])
    np.testing.assert_array_equal(sample["keypoints1"], tree["ann"]["trg_kps"])
    assert sample["valid_keypoints"].all()
    np.testing.assert_array_equal(sample["bbox1"], [2, 2, 9, 10])


def test_spair71k_errors_name_the_layout(tmp_path: Path, write_image) -> None:
    with pytest.raises(UserError, match="Layout/large"):
        SPair71k(tmp_path, split="test")
    _spair_tree(tmp_path / "SPair-71k", write_image)
    with pytest.raises(UserError, match="split"):
        SPair71k(tmp_path / "SPair-71k", split="dev")
    (tmp_path / "SPair-71k" / "PairAnnotation" / "test").rename(tmp_path / "moved")
    with pytest.raises(UserError, match="pair annotation not found"):
        SPair71k(tmp_path / "SPair-71k", split="test")[0]


def _pascal_tree(root: Path, write_image) -> None:
    root.mkdir(parents=True)
    (root / "test_pairs.csv").write_text(
        "source_image,target_image,class\n"
        "JPEGImages/2009_000001.jpg,JPEGImages/2010_000002.jpg,8\n")
    write_image(root / "JPEGImages" / "2009_000001.jpg", (12, 16))
    write_image(root / "JPEGImages" / "2010_000002.jpg", (14, 10))
    nan = np.nan
    for name, kps, bbox in [
        ("2009_000001", [[1.0, 2.0], [nan, nan], [5.0, 6.0], [3.0, 3.0]], [0, 0, 15, 11]),
        ("2010_000002", [[4.0, 4.0], [2.0, 2.0], [7.0, 8.0], [nan, nan]], [1, 1, 9, 13]),
    ]:
        path = root / "Annotations" / "cat" / f"{name}.mat"
        path.parent.mkdir(parents=True, exist_ok=True)
        scipy.io.savemat(str(path), {"kps": np.array(kps), "bbox": np.array([bbox], float)})


def test_pfpascal_pairs_keypoints_annotated_in_both_images(tmp_path: Path, write_image) -> None:
    _pascal_tree(tmp_path / "PF-PASCAL", write_image)
    sample = PFPascal(tmp_path / "PF-PASCAL", split="test")[0]
    assert sample["category"] == "cat"
    assert sample["image1"].shape == (14, 10, 3)
    np.testing.assert_array_equal(sample["valid_keypoints"], [True, False, True, False])
    np.testing.assert_array_equal(sample["keypoints0"][[0, 2]], [[1, 2], [5, 6]])
    np.testing.assert_array_equal(sample["keypoints1"][[0, 2]], [[4, 4], [7, 8]])
    assert np.isfinite(sample["keypoints0"]).all()
    np.testing.assert_array_equal(sample["bbox1"], [1, 1, 9, 13])


def test_pfpascal_bad_class_and_missing_split(tmp_path: Path, write_image) -> None:
    _pascal_tree(tmp_path / "PF-PASCAL", write_image)
    with pytest.raises(UserError, match=r"trn_pairs\.csv"):
        PFPascal(tmp_path / "PF-PASCAL", split="trn")
    (tmp_path / "PF-PASCAL" / "test_pairs.csv").write_text(
        "source_image,target_image,class\na.jpg,b.jpg,25\n")
    with pytest.raises(UserError, match=r"1\.\.20"):
        PFPascal(tmp_path / "PF-PASCAL", split="test")


def test_semantic_kinds_take_their_options_from_a_dataset_spec(tmp_path: Path,
                                                                write_image) -> None:
    # the registry passes keyword-only parameters: positional ones were refused as unknown
    _spair_tree(tmp_path / "SPair-71k", write_image)
    data, kind = open_dataset(f"spair71k,split=test,layout=large:{tmp_path / 'SPair-71k'}")
    assert kind.name == "spair71k" and len(data) == 1 and data.split == "test"
    with pytest.raises(UserError, match="split must be one of"):
        open_dataset(f"spair71k,split=dev:{tmp_path / 'SPair-71k'}")
    _pascal_tree(tmp_path / "PF-PASCAL", write_image)
    data, _ = open_dataset(f"pfpascal,split=test:{tmp_path / 'PF-PASCAL'}")
    assert data[0]["category"] == "cat"


def test_malformed_boxes_are_user_errors(tmp_path: Path, write_image) -> None:
    root = tmp_path / "PF-PASCAL"
    _pascal_tree(root, write_image)
    path = root / "Annotations" / "cat" / "2010_000002.mat"
    scipy.io.savemat(str(path), {"kps": np.zeros((4, 2)), "bbox": np.zeros((1, 3))})
    with pytest.raises(UserError, match=r"2010_000002\.mat: a bounding box is 4 finite"):
        PFPascal(root, split="test")[0]
    tree = _spair_tree(tmp_path / "SPair-71k", write_image)
    annotation = tmp_path / "SPair-71k" / "PairAnnotation" / "test" / f"{tree['pair']}.json"
    for box in ([2, 2, 9], [2, 2, 9, None], "2 2 9 10"):
        annotation.write_text(json.dumps({**tree["ann"], "trg_bndbox": box}))
        with pytest.raises(UserError, match="trg_bndbox: a bounding box is 4 finite"):
            SPair71k(tmp_path / "SPair-71k", split="test")[0]


def test_pfwillow_reads_test_pairs(tmp_path: Path, write_image) -> None:
    root = tmp_path / "PF-WILLOW"
    write_image(root / "car(G)" / "car_g_0001.png", (20, 30))
    write_image(root / "car(G)" / "car_g_0002.png", (25, 20))
    header = ["imageA", "imageB"] + [f"{c}{i}" for c in ("XA", "YA", "XB", "YB")
                                     for i in range(1, 11)]
    xa, ya, xb, yb = (np.arange(10) + offset for offset in (0, 1, 2, 3))
    row = ["PF-dataset/car(G)/car_g_0001.png", "PF-dataset/car(G)/car_g_0002.png",
           *map(str, np.concatenate([xa, ya, xb, yb]))]
    (root / "test_pairs.csv").write_text(",".join(header) + "\n" + ",".join(row) + "\n")
    sample = PFWillow(root)[0]
    assert sample["category"] == "car" and sample["image0"].shape == (20, 30, 3)
    # 1-based MATLAB coordinates -> 0-based pixels
    np.testing.assert_array_equal(sample["keypoints0"], np.stack([xa, ya], 1) - 1)
    np.testing.assert_array_equal(sample["keypoints1"], np.stack([xb, yb], 1) - 1)
    assert sample["valid_keypoints"].all() and sample["subclass"] == "car(G)"
    # "bbox": from the padding point (-1, -1), 1-based, to the largest target coordinates
    np.testing.assert_array_equal(sample["bbox1"], [-2, -2, xb.max() - 1, yb.max() - 1])
    (root / "test_pairs.csv").write_text("imageA,imageB\n")
    with pytest.raises(UserError, match="42 columns"):
        PFWillow(root)
    (root / "test_pairs.csv").write_text(",".join(header) + "\n" + ",".join(row[:30]) + "\n")
    with pytest.raises(UserError, match=r"test_pairs\.csv:2: expected 40 numbers"):
        PFWillow(root)
    (root / "test_pairs.csv").write_bytes(b"imageA,\xff\n")
    with pytest.raises(UserError, match=r"test_pairs\.csv:1: not UTF-8 text"):
        PFWillow(root)


def test_pfwillow_reads_the_rebuilt_folder(tmp_path: Path) -> None:
    points = write_pfwillow_folder(tmp_path, np.random.default_rng(1))
    data = PFWillow(tmp_path)
    assert len(data) == 4
    sample = data[1]
    assert sample["name"] == "car(G)/car_2-car_1"
    assert (sample["category"], sample["subclass"]) == ("car", "car(G)")
    np.testing.assert_allclose(sample["keypoints0"], points["images/car_G/car_2.png"] - 1,
                               atol=1e-5)
    np.testing.assert_allclose(sample["keypoints1"], points["images/car_G/car_1.png"] - 1,
                               atol=1e-5)
    top = points["images/car_G/car_1.png"].max(axis=0) - 1
    np.testing.assert_allclose(sample["bbox1"], [-2, -2, *top], atol=1e-5)
    assert [data[i]["category"] for i in range(4)] == ["car", "car", "duck", "duck"]


def _edit_csv(path: Path, line: int, column: str, value: str) -> None:
    rows = list(csv.reader(path.open(newline="")))
    rows[line - 1][rows[0].index(column)] = value
    with path.open("w", newline="") as file:
        csv.writer(file).writerows(rows)


@pytest.mark.parametrize(("file", "line", "column", "value", "message"), [
    ("pairs.csv", 3, "src_kps", "1;2;3", r"pairs\.csv:3: src_kps: expected 10 keypoints"),
    ("pairs.csv", 2, "trg_kps", "a;" * 19 + "b", r"pairs\.csv:2: trg_kps: expected 10"),
    ("pairs.csv", 4, "src_image", "images/car_G/none.png",
     r"pairs\.csv:4: image images/car_G/none\.png is not listed in keypoints\.csv"),
    ("pairs.csv", 2, "subclass", "car(M)", r"pairs\.csv:2: .* is car / car\(G\) in"),
    ("keypoints.csv", 3, "width", "wide", r"keypoints\.csv:3: width and height must be whole"),
    ("keypoints.csv", 2, "image", "images/car_G/gone.png",
     r"keypoints\.csv:2: image .*gone\.png not found"),
])
def test_pfwillow_folder_errors_name_file_and_line(tmp_path: Path, file: str, line: int,
                                                   column: str, value: str,
                                                   message: str) -> None:
    write_pfwillow_folder(tmp_path, np.random.default_rng(1))
    _edit_csv(tmp_path / file, line, column, value)
    with pytest.raises(UserError, match=message):
        PFWillow(tmp_path)


def test_pfwillow_folder_bad_layouts_are_user_errors(tmp_path: Path) -> None:
    points = write_pfwillow_folder(tmp_path, np.random.default_rng(1))
    pairs = tmp_path / "pairs.csv"
    text = pairs.read_text().splitlines()
    pairs.write_text("\n".join([text[0], text[1] + ",extra", *text[2:]]) + "\n")
    with pytest.raises(UserError, match=r"pairs\.csv:2: 7 fields, the header has 6"):
        PFWillow(tmp_path)
    pairs.write_text("\n".join(text) + "\n")
    _edit_csv(pairs, 2, "src_kps", keypoint_text(points["images/car_G/car_1.png"] + 0.01))
    with pytest.raises(UserError, match=r"pairs\.csv:2: src_kps differ from the keypoints"):
        PFWillow(tmp_path)
    pairs.write_bytes(pairs.read_bytes().replace(b"car_2.png,car", b"car_\xff.png,car", 1))
    with pytest.raises(UserError, match=r"pairs\.csv:\d+: not UTF-8 text"):
        PFWillow(tmp_path)
    pairs.write_text("a,b\n")
    with pytest.raises(UserError, match=r"pairs\.csv: expected a header with the columns"):
        PFWillow(tmp_path)
    (tmp_path / "keypoints.csv").unlink()
    with pytest.raises(UserError, match=r"keypoints\.csv: not found"):
        PFWillow(tmp_path)
    pairs.unlink()
    with pytest.raises(UserError, match=r"neither test_pairs\.csv nor pairs\.csv"):
        PFWillow(tmp_path)


def test_pfwillow_image_of_another_size_than_listed_is_a_user_error(tmp_path: Path) -> None:
    write_pfwillow_folder(tmp_path, np.random.default_rng(1))
    io.write_image(tmp_path / "images/car_G/car_2.png", np.zeros((10, 12, 3), np.uint8))
    with pytest.raises(UserError, match=r"car_2\.png: image is 12 x 10 px, keypoints\.csv "
                                        r"says 64 x 48"):
        PFWillow(tmp_path)[0]
