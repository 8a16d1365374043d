"""The TACO acceleration wheel: the plan (baked, install or skipped), activation, the image-build bake and the summary it prints."""
