"""File formats, dataset readers, the synthetic scene engine and augmentation."""
