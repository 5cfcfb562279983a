"""Where the confined child imports flashsim from: exactly the files of the allow-list, by module name.

Landlock lets the child read those files and no folder of flashsim, so Python's own finder, which
lists a package's folder, finds nothing there; this finder, first on `sys.meta_path`, maps each
allowed module to its file. Any other module of `sim` is not found (ModuleNotFoundError).
"""

import importlib.util
import os
import sys


class AllowedModules:
    """A meta-path finder for {module name: file}; a package's file is its __init__.py."""

    def __init__(self, files: dict[str, str]):
        self.files = dict(files)

    def find_spec(self, name: str, path=None, target=None):
        file = self.files.get(name)
        if file is None:
            if name == "sim" or name.startswith("sim."):  # never from the path, even where the path keeps the root
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None
        package = os.path.basename(file) == "__init__.py"
        return importlib.util.spec_from_file_location(
            name, file, submodule_search_locations=[os.path.dirname(file)] if package else None
        )


def install(files: dict[str, str], root: str, packages: list[str] = ()) -> None:
    """Import flashsim's modules from `files` only: the finder goes first, and `root` leaves the path, unless the
    child needs whole `packages` from it (the GPU assignment: `gpu`, whose kernels load lazily)."""
    sys.meta_path.insert(0, AllowedModules(files))
    if packages:
        return
    while root in sys.path:
        sys.path.remove(root)
