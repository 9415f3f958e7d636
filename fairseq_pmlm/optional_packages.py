"""Packages that requirements.txt marks optional: only the main job or the suite needs them, so a
set-up from a folder of wheels (PMLM_WHEELS) may go without. A command that needs one that is
absent stops with one line naming it, not an ImportError traceback."""
import importlib.util

from .errors import OneLineError


class MissingPackage(OneLineError, ImportError):
    """An optional requirement that a command needs is not installed."""


def missing(requirement, needed_for):
    return MissingPackage(f"{needed_for} needs {requirement}, which is not installed (requirements.txt marks it "
                          "optional: scripts/setup_env.sh installs it, from a PMLM_WHEELS folder when the folder "
                          "has its wheel)")


def package_dir(module, requirement, needed_for):
    """The directory of an installed package (found, not imported), or MissingPackage."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise missing(requirement, needed_for)
    return list(spec.submodule_search_locations)[0]
