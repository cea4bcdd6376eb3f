"""The run inside the delivery image: the container runtime, the image it resolves, the commands.

``reference`` an image reference as written: ``name[:tag][@sha256:...]`` or an image id.
``runtime``   podman or docker, found and asked: its version, an image's inspection (the
              digest that pins it, its id, platform, working folder, environment), the
              options that pass the GPUs in.
``place``     where commands run: this machine (:data:`place.HOST`) or fresh containers of
              the image (:class:`place.InImage`), through :mod:`gate.proc`.
``info``      what result.json records about the image (:class:`info.ContainerInfo`),
              through the runtime or from inside the container.
"""
