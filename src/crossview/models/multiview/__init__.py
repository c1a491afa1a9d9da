"""The small multi-view transformers of the camera studies: novel-view synthesis (``model``)
and depth of every view (``depth``), both keeping the multi-view contract (``contract``: what
their recipes and the studies call); ``specs`` registers them."""

from crossview.models.multiview.model import CONDITIONINGS as CONDITIONINGS
from crossview.models.multiview.model import MultiViewConfig as MultiViewConfig
from crossview.models.multiview.model import MultiViewTransformer as MultiViewTransformer
