"""Known upstream defects: the registry that keeps the gate green on a stack's known state and red on anything
new. ``defect`` is the mechanism (an entry, its ranges, what its failure becomes), ``signatures`` the
predicates that tell a defect's own failure from any other, ``entries`` the registry as data (its entries defined in
``upstream``, by what they concern, citing the runs of ``runs``) and ``registry`` the lookups over it."""
