"""Exporting models to other runtimes: ``modules.py`` wraps a model so that it returns only its
final outputs, ``onnx.py`` writes and runs ONNX files (``pip install 'crossview[export]'``)."""
