"""The recipe of every training task (see :mod:`crossview.train.recipe` for the interface and
the registry, :data:`~crossview.train.recipe.RECIPES`; each module registers its own).

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

from crossview.train.recipe import RECIPES, get_recipe, register_recipe

__all__ = ["RECIPES", "get_recipe", "register_recipe"]
