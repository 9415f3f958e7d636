from setuptools import find_packages, setup

# install_requires is empty on purpose: fairseq must come from ve-fairseq installed with
# --no-deps (it declares torchaudio, which would pull a CUDA torch). scripts/setup_env.sh
# installs the pinned stack from requirements.txt.
setup(
    name="fairseq-pmlm",
    version="0.1.0",
    description="UniLMv2 pseudo-masked language model (PMLM) as a fairseq plugin",
    packages=find_packages(include=["fairseq_pmlm", "fairseq_pmlm.*"]),
    python_requires=">=3.10",
)
