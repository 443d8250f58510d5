// Package upstream groups what the adapter reads from TiDB/TiKV: the byte
// codecs (tidbcodec), the mounter, the schema store, the log puller and PD
// access. This package itself holds no code.
package upstream
