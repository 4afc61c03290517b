"""Known regressions of thunder's TE executors, injectable into the installed thunder at run time: the
catalog (``catalog``) and the patches it applies, by the part of thunder they change (``legacy``,
``functional``, ``distributed``). The gate must fail under each one that applies."""
