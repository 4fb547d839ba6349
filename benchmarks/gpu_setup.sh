#!/usr/bin/env bash
# Make an offline GPU machine ready for benchmarks/gpu_verify.sh, from files copied onto it:
#
#   source benchmarks/gpu_setup.sh [WHEELS_DIR] [DEBS_DIR]
#
# WHEELS_DIR (default .whl): wheels of the project's dependencies; only those whose module does
#   not import already are installed, so the machine's own torch stack is left alone. Wheels of
#   cuda-cccl there (and of cuda-core, cuda-pathfinder where the machine's are too old) install
#   cuda.compute for its submissions.
# DEBS_DIR (default .bwrap): Debian's bubblewrap and the libraries it links (bubblewrap,
#   libselinux1, libcap2, libpcre2-8-0), for a machine without bwrap: unpacked under
#   /tmp/kb-bwrap, started through the dynamic loader with those libraries, so nothing of them
#   reaches the sandboxed worker's environment. Exports KERNELBOARD_BWRAP and requires the
#   sandbox (KERNELBOARD_SANDBOX=require), as a real runner would.
# Then the project itself is installed in editable mode, without dependencies.
wheels=${1:-.whl}
debs=${2:-.bwrap}

# module:distribution, for what pyproject.toml needs at run time and for the tests
needed="pytest:pytest pytest_benchmark:pytest-benchmark cpuinfo:py-cpuinfo xdist:pytest-xdist
execnet:execnet yaml:PyYAML jsonschema:jsonschema referencing:referencing rpds:rpds-py
jsonschema_specifications:jsonschema-specifications attrs:attrs markdown_it:markdown-it-py
mdurl:mdurl pygments:Pygments pynvml:nvidia-ml-py orjson:orjson github:PyGithub jwt:PyJWT
nacl:PyNaCl deprecated:Deprecated wrapt:wrapt jinja2:Jinja2 aiohttp:aiohttp multidict:multidict
yarl:yarl frozenlist:frozenlist aiosignal:aiosignal propcache:propcache
aiohappyeyeballs:aiohappyeyeballs iniconfig:iniconfig pluggy:pluggy packaging:packaging
markupsafe:MarkupSafe cffi:cffi pycparser:pycparser setuptools:setuptools"
missing=()
for pair in $needed; do
    python3 -c "import ${pair%%:*}" 2>/dev/null || missing+=("${pair##*:}")
done
if [ ${#missing[@]} -gt 0 ] && [ -d "$wheels" ]; then
    echo "installing from $wheels: ${missing[*]}"
    python3 -m pip install -q --no-index --no-deps --find-links "$wheels" "${missing[@]}"
fi
# cuda.compute (the cuda-compute extra), only where its wheels were copied: resolved offline
# against what is installed, so the machine's own CUDA libraries (torch's) stay as they are.
if ls "$wheels"/cuda_cccl-*.whl >/dev/null 2>&1 && ! python3 -c "import cuda.compute" 2>/dev/null; then
    echo "installing cuda.compute from $wheels"
    python3 -m pip install -q --no-index --find-links "$wheels" cuda-cccl "cuda-core>=0.5"
fi

if ! command -v bwrap >/dev/null && [ -d "$debs" ]; then
    mkdir -p /tmp/kb-bwrap/root
    for deb in "$debs"/*.deb; do dpkg -x "$deb" /tmp/kb-bwrap/root; done
    libs=/tmp/kb-bwrap/root/lib/x86_64-linux-gnu:/tmp/kb-bwrap/root/usr/lib/x86_64-linux-gnu
    cat >/tmp/kb-bwrap/bwrap <<EOF
#!/bin/sh
exec /lib64/ld-linux-x86-64.so.2 --library-path $libs /tmp/kb-bwrap/root/usr/bin/bwrap "\$@"
EOF
    chmod +x /tmp/kb-bwrap/bwrap
    export KERNELBOARD_BWRAP=/tmp/kb-bwrap/bwrap
fi
export KERNELBOARD_SANDBOX=require
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -2

# An image whose packages ship without bytecode makes every new process compile what it imports
# (torch: about 1,400 modules, 3.3 s on the H100), where a runner that has run once reads its
# bytecode. GPU_SETUP_BYTECODE=0 keeps the image as it is, to measure that first run.
if [ "${GPU_SETUP_BYTECODE:-1}" = 1 ]; then
    started=$SECONDS
    # one py_compile per 200 files, 16 at a time (compileall's own process pool broke there)
    python3 - <<'PY' | xargs -0 -P 16 -n 200 python3 -m py_compile 2>/dev/null
import importlib.util, os, sys
roots = {os.path.dirname(os.__file__), os.path.abspath("pytest_kernelboard")}  # stdlib, ours
for name in ("torch", "triton", "numpy", "_pytest", "pytest", "pluggy", "yaml", "jinja2", "pynvml",
             "xdist", "execnet", "pytest_benchmark", "jsonschema", "sympy", "networkx", "filelock",
             "fsspec", "typing_extensions", "markupsafe", "attr", "referencing", "rpds", "orjson"):
    spec = importlib.util.find_spec(name)
    if spec and spec.origin:
        roots.add(os.path.dirname(spec.origin) if spec.submodule_search_locations else spec.origin)
for root in sorted(roots):
    walk = os.walk(root) if os.path.isdir(root) else [(os.path.dirname(root), [], [os.path.basename(root)])]
    for folder, _, files in walk:
        for name in files:
            if name.endswith(".py"):
                sys.stdout.write(os.path.join(folder, name) + "\0")
PY
    echo "bytecode took $((SECONDS - started)) s"
fi
"${KERNELBOARD_BWRAP:-bwrap}" --unshare-all --die-with-parent --ro-bind / / true \
    && echo "sandbox: ${KERNELBOARD_BWRAP:-bwrap} works"
