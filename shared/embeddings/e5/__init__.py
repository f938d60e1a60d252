"""The bundled e5 model's native engine: kernels, the engine builder, model lanes, OpenMP and
BLAS thread control, and the probe of loaded libraries. Nothing outside this package knows
about OpenMP threads or `/proc/self/maps`; see docs/e5-engine.md."""
