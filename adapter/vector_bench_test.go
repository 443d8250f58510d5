package adapter

import "os"

// vectorGraphEager: SFEMU_VECTOR_GRAPH=eager makes the pipeline benchmarks
// build the vector HNSW graph in the background as soon as a collection
// reaches the threshold (emulator.Options.VectorGraphEager), as it is once
// the collection has been vector-searched; by default no benchmark searches,
// so no graph is built (VEC-G3) and the vector modality costs its slab only.
func vectorGraphEager() bool { return os.Getenv("SFEMU_VECTOR_GRAPH") == "eager" }
