# The release image: nothing but the static drainit, for `COPY --from=`.
# Built by scripts/release.sh (one image per architecture, from the binaries
# it built) and by tests/container.rs. Context: a directory holding `drainit`.
FROM scratch
# COPY first: the legacy builder commits ARG steps as host-platform images,
# and then refuses to COPY onto them for another platform.
COPY drainit /drainit
ARG VERSION=unknown
ARG REVISION=unknown
LABEL org.opencontainers.image.title="drainit" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION"
ENTRYPOINT ["/drainit"]
