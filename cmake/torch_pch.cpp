// Translation unit that owns the shared precompiled LibTorch header (see MgpuTarget.cmake).
