"""What every keypoint-matching (semantic correspondence) family shares: the contract its
network keeps (:mod:`~crossview.models.keypoints.contract`), the normalised coordinates it works
in (:mod:`~crossview.models.keypoints.coordinates`) and the inference on one pair of any sizes
built on nothing else (:mod:`~crossview.models.keypoints.inference`)."""
