"""The paper's experiments on the runtime (tables), each built on resumable sweeps."""
