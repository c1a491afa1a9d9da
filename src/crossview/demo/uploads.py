"""Reading what the page uploads: images decoded by crossview's reader
(:func:`crossview.api.read_image`: EXIF orientation, 16-bit images), refused with a
:class:`~crossview.errors.UserError` that names the field, not the server's temporary file,
when a field is empty, the file is not an image, it is larger than :data:`MAX_MEGAPIXELS`, or
the two images of a pair differ in size.

:func:`image_field` is Gradio's image field whose upload reaches the handler as the uploaded
file's path, undecoded (Gradio itself would open it with Pillow first and fail on a file that
is not an image with its own message).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gradio as gr
import numpy as np
from PIL import Image

from crossview import api
from crossview.errors import UserError

MAX_MEGAPIXELS = 25.0  # a 48 MP phone photograph is refused; the models run at 0.5-0.7 MP
MAX_UPLOAD = "60mb"  # Gradio refuses larger files in the page, before they are sent


def image_field(**options: Any) -> gr.Image:
    """A ``gr.Image`` upload field (``options`` as gr.Image's) whose value reaches a handler as
    the path of the uploaded file (which Gradio has checked to lie in its upload folder),
    undecoded: the handler reads it with :func:`read_upload`."""
    field = gr.Image(type="filepath", **options)

    def path(payload: Any) -> Any:
        if payload is None or payload.path is None:  # nothing, or pasted data
            return gr.Image.preprocess(field, payload)
        return payload.path

    # on the instance: a subclass of a Gradio component makes Gradio write a .pyi file beside
    # the subclass's module
    field.preprocess = path
    return field


def read_upload(path: str | os.PathLike[str] | None, field: str) -> np.ndarray:
    """The image uploaded to ``field`` (``"left image"``) as ``[H, W, 3]`` uint8; a
    :class:`UserError` naming ``field`` when there is none, it is not an image or it holds more
    than :data:`MAX_MEGAPIXELS`."""
    if path is None:
        raise UserError(f"no {field}: upload one")
    path = Path(path)
    shown = f"{field} ({path.name})"
    try:
        with Image.open(path) as header:  # the size only: nothing decoded yet
            width, height = header.size
    except (OSError, ValueError, Image.DecompressionBombError):
        width = height = 0  # crossview's reader says what is wrong with it
    if width * height > MAX_MEGAPIXELS * 1e6:
        raise UserError(f"{shown} is {width}x{height} px ({width * height / 1e6:.3g} MP); the "
                        f"demo takes images up to {MAX_MEGAPIXELS:g} MP: make it smaller")
    try:
        return api.read_image(path)
    except UserError as error:
        raise UserError(renamed(str(error), path, shown)) from None


def renamed(message: str, path: Path, shown: str) -> str:
    """``message`` about the uploaded file ``path`` as the page names it: ``shown`` (``left
    image (photo.jpg)``) where it starts with the path, the file's name elsewhere (the server's
    temporary folder means nothing to the user)."""
    head = str(path)
    if message.startswith(head):
        message = shown + message[len(head):]
    return message.replace(head, path.name)


def read_pair(first: str | os.PathLike[str] | None, second: str | os.PathLike[str] | None,
              fields: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
    """Both uploads (:func:`read_upload`), of one size (a :class:`UserError` otherwise)."""
    a, b = read_upload(first, fields[0]), read_upload(second, fields[1])
    (ha, wa), (hb, wb) = a.shape[:2], b.shape[:2]
    if (ha, wa) != (hb, wb):
        raise UserError(f"the {fields[0]} is {wa}x{ha} px but the {fields[1]} is {wb}x{hb} "
                        "(W x H); a pair needs one size")
    return a, b
