"""Refinery: WARC -> clean pretraining text (Apache Beam) -> small-GPT training (torchrun)."""
from setuptools import find_packages, setup

# A real distributed engine for `refinery run` (pipeline/engines/dask_runner.py); workers need the same versions.
DASK = ["dask>=2025.1,<2027", "distributed>=2025.1,<2027"]

setup(
    name="refinery",
    version="0.1.0",
    description="Open pipeline from raw web crawls to clean pretraining data, and training on it",
    python_requires=">=3.10",
    packages=find_packages(include=["common", "common.*", "pipeline", "pipeline.*", "refinery", "stages", "stages.*", "training",
                                   "training.*"]),
    # Models travel as package data so Beam workers on a cluster find them (--setup_file).
    package_data={"refinery": ["py.typed"],  # the Python API is typed (PEP 561)
                  "stages.models": ["*.ftz", "*.bin", "*.npz", "*.card.json", "*.yaml", "extract_cascade.json", "README.md"],
                  "pipeline.reports": ["templates/*.html"],   # report.html's Jinja2 template
                  "stages.harmful": ["lists/SOURCES.md", "lists/*/*", "lists/*/*/*", "lists/*/*/*/*", "identity/*.yaml",
                                     "identity/README.md"]},
    include_package_data=True,
    install_requires=[
        "apache-beam==2.77.*",        # pipeline/engines/dask_runner.py uses Beam internals checked against 2.77 (a test checks the pin)
        "pyarrow>=15,<26",            # Beam 2.77 caps pyarrow below 26
        "trafilatura>=2.3,<2.4",      # the speedups are verified per version (stages/extraction/trafilatura_speedups.py)
        "lxml_html_clean>=0.4",       # trafilatura needs lxml.html.clean, split out of lxml 5.2+
        "warcio>=1.8,<2",
        "isal>=1.6,<2",               # ISA-L inflate for WARC gzip members (stages/extraction/warc.py)
        "resiliparse>=2.0,<3",        # extract.engine resiliparse / cascade (DCLM's extractor; wheels with its C++ code)
        "charset-normalizer>=3.3,<4",
        "ftfy>=6.3,<7",               # text repair before language ID (stages/text_repair.py), as FineWeb-2 does
        "brotli>=1.2,<2",             # Content-Encoding: br; 1.2 adds output_buffer_limit (bounded decoding)
        # The archived `fasttext` wheel breaks predict() under numpy 2; this maintained
        # drop-in imports as `fasttext` and keeps train_supervised.
        "fasttext-community>=0.11.9,<0.12",
        "pycld2>=0.41,<0.43",          # the second opinion on unsure language labels (stages/cld2.py; tables in the wheel)
        "numpy>=1.26",
        "datasketch>=1.6,<3",
        "pyyaml>=6",
        "jinja2>=3.1,<4",             # report.html from pipeline/reports/templates/report.html (autoescaped)
        "google-re2>=1.1",            # PII patterns: linear-time matching on hostile text
        "tldextract>=5.1,<6",         # registered domains for the URL filter (its bundled public suffix list)
        "pyicu-wheels>=2.15",         # ICU word segmentation for zh/ja/th (bundles ICU's dictionaries)
        "torch>=2.6,<2.15",           # the Makefile installs the local CPU build 2.13.0 first; FSDP2 fully_shard is public from 2.6
        "tokenizers>=0.20,<0.24",     # optional trained BPE for training (training/tokenizer.py)
    ],
    extras_require={
        "test": ["pytest>=8", "pytest-timeout>=2.3", "duckdb>=1.0", "datasets>=3.0", "matplotlib>=3.8",
                 "ruff>=0.16,<0.17", "pytest-xdist>=3.6,<4",
                 "tensorboard>=2.16,<3",        # the training run's optional TensorBoard log is tested
                 "megatron-core>=0.16,<0.17",   # its own IndexedDataset reads `refinery tokenize --format megatron`
                 #                                (17 MB, torch already installed: ~3 s in CI)
                 "datatrove>=0.10,<0.11",       # its own dataset reads `--format datatrove` (+ loguru, humanize: ~2 s)
                 *DASK, "dask-jobqueue>=0.9,<0.10",  # the Dask runner, on a real scheduler and workers in CI; Slurm
                 # a real S3 server on 127.0.0.1 for the object-store run (moto's, S3 alone: ~16 s in CI). Exact pins:
                 # s3fs (datasets reads s3:// through it) pins fsspec and, through aiobotocore, botocore; with a
                 # free boto3 pip walked through boto3 releases for ~3 min to resolve them.
                 "moto[s3]>=5.1,<6", "flask>=3,<4", "flask-cors>=5,<7", "boto3==1.43.117", "s3fs==2026.9.0"],
        "dask": DASK,
        "s3": ["boto3>=1.35,<2"],             # s3:// inputs and outputs (Beam's S3 filesystem; as apache-beam[aws])
        "slurm": [*DASK, "dask-jobqueue>=0.9,<0.10"],  # refinery slurm submit --phase2-dask-workers N                         # --runner=pipeline.engines.dask_runner.RefineryDaskRunner (README "Running on a cluster")
        "plots": ["matplotlib>=3.8"],         # PNGs of `refinery report`, training curves
        "tensorboard": ["tensorboard>=2.16,<3"],  # `refinery train` also logs to OUT/tensorboard
    },
    entry_points={"console_scripts": ["refinery=pipeline.cli:console_main"]},
)
