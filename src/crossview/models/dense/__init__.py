"""What every dense (stereo / optical flow) family shares: the contract its network keeps
(:mod:`~crossview.models.dense.contract`) and the inference, evaluation and memory check built
on nothing else (:mod:`~crossview.models.dense.inference`)."""
