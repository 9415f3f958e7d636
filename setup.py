from setuptools import find_packages, setup

# install_requires is empty on purpose: the pinned stack (requirements.txt) is installed by
# scripts/setup_env.sh, because ve-fairseq must go in with --no-deps (it declares torchaudio,
# which would pull a CUDA torch), and a dependency list here would let pip resolve a torch.
setup(
    name="fairseq-pmlm",
    version="0.1.0",
    description="UniLMv2 pseudo-masked language model (PMLM) as a fairseq plugin",
    packages=find_packages(include=["fairseq_pmlm", "fairseq_pmlm.*"]),
    python_requires=">=3.10",
    install_requires=[],
)
