"""The recipe of every training task (see :mod:`crossview.train.recipe` for the interface).

==============  ==========================================  ===================================
task            family                                      file
==============  ==========================================  ===================================
``stereo``      MatchStereo                                 :mod:`~.fields`
``flow``        MatchFlow                                   :mod:`~.fields`
``semantic``    TransforMatcher                             :mod:`~.semantic`
``novel-view``  the camera-encoding study's transformer     :mod:`~.novel_view`
``multiview-    the depth study's transformer               :mod:`~.multiview_depth`
depth``
==============  ==========================================  ===================================
"""

from __future__ import annotations

from crossview.errors import UserError
from crossview.train.recipe import Recipe
from crossview.train.recipes.fields import FieldRecipe
from crossview.train.recipes.multiview_depth import MultiViewDepthRecipe
from crossview.train.recipes.novel_view import NovelViewRecipe
from crossview.train.recipes.semantic import SemanticRecipe

RECIPES: dict[str, Recipe] = {
    "stereo": FieldRecipe("stereo"),
    "flow": FieldRecipe("flow"),
    "semantic": SemanticRecipe(),
    "novel-view": NovelViewRecipe(),
    "multiview-depth": MultiViewDepthRecipe(),
}


def get_recipe(task: str) -> Recipe:
    """The recipe that trains ``task`` (:class:`UserError` naming the known ones)."""
    if task not in RECIPES:
        raise UserError(f"no training recipe for task {task!r}; known: {', '.join(RECIPES)}")
    return RECIPES[task]
