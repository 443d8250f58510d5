package fakeupstream_test

import "github.com/searchfabric/sfemu/fakeupstream/mvcc"

func mvccWrite() mvcc.Write {
	return mvcc.Write{Kind: mvcc.WritePut, StartTs: 10, CommitTs: 11, Value: []byte("torn")}
}
