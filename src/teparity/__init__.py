"""teparity: the regression gate for lightning-thunder's TransformerEngine executors.

Importing it first makes the process safe for TE 1.x's import-order clash (``teparity.stack.importorder``):
every process the gate starts imports teparity before thunder or TE.
"""

from teparity.stack import importorder as _importorder

_importorder.prepare()
