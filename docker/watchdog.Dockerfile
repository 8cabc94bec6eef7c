# Checkpoint watchdog sidecar: keeps verl checkpoints within a disk budget and the resume tracker valid.
# Build:  docker build -f docker/watchdog.Dockerfile -t rlrecipes/watchdog:py3.12 .
# The watchdog imports only the standard library, so the image holds Python and the rlrecipes package
# installed with --no-deps: no torch, no verl, no third-party wheels (docs/watchdog.md).
# CI builds it against a stand-in Debian base tagged python:3.12-slim (scripts/ci/standin-bases.sh), so
# every step uses `python3` and a virtual environment, which both bases provide.
ARG PYTHON_VERSION=3.12
# scripts/build-image.sh passes BASE_IMAGE=<this>@sha256:... when docker/bases.lock pins it (`make lock`).
ARG BASE_IMAGE=python:3.12-slim
FROM ${BASE_IMAGE} AS wheel

# The build backend, pinned: building the wheel here keeps setuptools out of the final image.
ARG SETUPTOOLS_VERSION=80.9.0
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN python3 -m venv /opt/build \
    && /opt/build/bin/pip install "setuptools==${SETUPTOOLS_VERSION}"
# README.m[d]: setuptools reads it for the package metadata; the glob keeps a checkout without it buildable.
COPY pyproject.toml README.m[d] /src/
COPY rlrecipes /src/rlrecipes
RUN /opt/build/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheels /src

FROM ${BASE_IMAGE}

ARG PYTHON_VERSION=3.12
# The sidecar must be able to rename and delete what the trainer writes: give the checkpoint volume this
# group with the setgid bit (chmod 2775) and run the trainer with umask 0002, or match its UID (docs/watchdog.md).
ARG WATCHDOG_UID=10001
ARG WATCHDOG_GID=10001

LABEL org.opencontainers.image.title="rlrecipes-watchdog" \
      org.opencontainers.image.description="Disk-quota and resume-tracker watchdog for verl checkpoints (stdlib only), Python ${PYTHON_VERSION}" \
      io.rlrecipes.image="watchdog" \
      io.rlrecipes.python="${PYTHON_VERSION}"

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    CKPT_DIR=/workspace/checkpoints \
    WATCHDOG_MIN_FREE=20G

# A plain COPY, not a bind mount: the wheel is ~100 kB and this also builds without BuildKit.
COPY --from=wheel /wheels /tmp/wheels
# The venv gets no pip of its own: the base's pip installs into it (--python), so nothing but the package lands.
RUN python3 -m venv --without-pip /opt/venv \
    && python3 -m pip --python /opt/venv/bin/python install --no-deps --no-compile /tmp/wheels/rlrecipes-*.whl \
    && rm -rf /tmp/wheels \
    && /opt/venv/bin/rlrecipes --version \
    && groupadd --system --gid "${WATCHDOG_GID}" watchdog \
    && useradd --system --uid "${WATCHDOG_UID}" --gid "${WATCHDOG_GID}" --no-create-home --home-dir /nonexistent \
         --shell /usr/sbin/nologin watchdog \
    && mkdir -p /workspace/checkpoints \
    && chown "${WATCHDOG_UID}:${WATCHDOG_GID}" /workspace/checkpoints
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:${PATH}

USER ${WATCHDOG_UID}:${WATCHDOG_GID}
WORKDIR /workspace

# Fresh status with no error finding, else unhealthy (a trainer waits for service_healthy). --root defaults
# to $CKPT_DIR; pass --status to `rlrecipes watchdog` and to the healthcheck together if you move it.
HEALTHCHECK --interval=15s --timeout=10s --start-period=60s --retries=3 CMD ["rlrecipes", "healthcheck"]

# The free-space floor is WATCHDOG_MIN_FREE above (the one value; compose passes a user's own through).
CMD ["rlrecipes", "watchdog", "--root", "/workspace/checkpoints", "--keep-last", "2", "--interval", "30"]
