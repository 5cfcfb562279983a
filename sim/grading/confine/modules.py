"""Where the confined child imports flashsim from: exactly the files of the allow-list, by module name.

Landlock lets the child read those files and no folder of flashsim, so Python's own finder, which
lists a package's folder, finds nothing there; this finder, first on `sys.meta_path`, maps each
allowed module to its file. Any other module of flashsim is not found (ModuleNotFoundError).
"""

import importlib.util
import os
import sys

BLOCKED = ("sim", "gpu", "flashsim_lessons")  # flashsim's packages: the answers, the masters, the GPU library


class AllowedModules:
    """A meta-path finder for {module name: file}; a package's file is its __init__.py. Any other module of
    flashsim's packages (but those in `packages`) is not found, wherever the path would find it."""

    def __init__(self, files: dict[str, str], packages=()):
        self.files = dict(files)
        self.blocked = tuple(p for p in BLOCKED if p not in packages)

    def find_spec(self, name: str, path=None, target=None):
        file = self.files.get(name)
        if file is None:
            if name.split(".")[0] in self.blocked:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None
        package = os.path.basename(file) == "__init__.py"
        return importlib.util.spec_from_file_location(
            name, file, submodule_search_locations=[os.path.dirname(file)] if package else None
        )


def install(files: dict[str, str], packages: list[str] = ()) -> None:
    """Import flashsim's modules from `files` only: the finder goes first and refuses the rest of flashsim's packages
    (but whole `packages` the child needs: the GPU assignment's `gpu`). The path stays as it is: in an install
    flashsim's folder is site-packages, where NumPy is too."""
    sys.meta_path.insert(0, AllowedModules(files, packages))
