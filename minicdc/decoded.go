package minicdc

import "github.com/searchfabric/sfemu/upstream/mounter"

// DecodedRow is the decoder's output for one entry: upstream/mounter's
// RowChange (row type, borrowed row images, an owned copy of the key, the
// handle-only flag and the physical table id from the key).
type DecodedRow = mounter.RowChange
