"""Container images read without a runtime: OCI layouts, oci-archive and docker-archive tarballs.

``source``  what an argument names (``oci:DIR``, ``oci-archive:TAR``, ``docker-archive:TAR``,
            ``podman:NAME``, ``docker:NAME``, or a folder or tarball recognised by content).
``layout``  the manifest, config and layers of one image, its platform chosen from an index.
``blobs``   blob access and verification: every blob's SHA-256 (and size) is checked as it
            is read; layers are streamed through gzip or zstd, never held whole.
``merge``   the layers applied in order, whiteouts included, into a merged view (path ->
            layer, size, mode, link target), writing only the files chosen as candidates.
``runtime`` ``podman``/``docker image save`` of an image by name (through :mod:`gate.proc`).
``reports`` the per-file inspection of an image's candidate files, each file's layer kept.
"""
