package minicdc

import "github.com/searchfabric/sfemu/upstream/mounter"

// DecodedRow is the decoder's output for one entry (upstream/mounter's
// RowChange shape): row type, borrowed row images, an owned copy of the key
// and whether only the handle columns of a delete are known.
type DecodedRow struct {
	RowType    mounter.RowType
	Row        mounter.Row
	PreRow     mounter.Row
	RowKey     []byte
	HandleOnly bool
}
