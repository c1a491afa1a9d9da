"""The small multi-view transformer used by the camera-encoding comparison."""

from crossview.models.multiview.model import CONDITIONINGS as CONDITIONINGS
from crossview.models.multiview.model import MultiViewConfig as MultiViewConfig
from crossview.models.multiview.model import MultiViewTransformer as MultiViewTransformer
