package sim

import "github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"

func recordKey(phys, handle int64) []byte { return tablecodec.EncodeIntRecordKey(nil, phys, handle) }
