"""The TACO acceleration wheel: the plan (baked, install, skipped or off), activation on the way to launch, the
image-build bake and the optimization summary it prints."""
