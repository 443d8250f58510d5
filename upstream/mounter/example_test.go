package mounter_test

import (
	"fmt"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/mounter"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/rowcodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

func ExampleMounter_Decode() {
	// CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR(32)) -- table id 100
	id := &model.ColumnInfo{ID: 1, Name: model.NewCIStr("id"), Offset: 0, State: model.StatePublic}
	id.FieldType = *types.NewFieldType(mysql.TypeLonglong)
	id.FieldType.AddFlag(mysql.PriKeyFlag | mysql.NotNullFlag)
	name := &model.ColumnInfo{ID: 2, Name: model.NewCIStr("name"), Offset: 1, State: model.StatePublic}
	name.FieldType = *types.NewFieldType(mysql.TypeVarchar)
	name.FieldType.SetCharset("utf8mb4")
	ti := &model.TableInfo{ID: 100, Name: model.NewCIStr("t"), PKIsHandle: true, Columns: []*model.ColumnInfo{id, name}}

	// UPDATE t SET name = 'new' WHERE id = 7, as TiKV's CDC delivers it.
	oldVal, _ := rowcodec.EncodeV2(nil, []int64{2}, []value.Datum{value.NewStringDatum("old")}, nil)
	newVal, _ := rowcodec.EncodeV2(nil, []int64{2}, []value.Datum{value.NewStringDatum("new")}, nil)
	entry := &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: tablecodec.EncodeIntRecordKey(nil, 100, 7), Value: newVal, OldValue: oldVal}

	m := mounter.New(mounter.Config{RequireOldValue: true})
	var rc mounter.RowChange
	if err := m.Decode(entry, ti, &rc); err != nil {
		panic(err)
	}
	before, _ := rc.PreRow.Column(2)
	fmt.Println(rc.RowType, before)
	_ = rc.Row.ForEach(func(c *model.ColumnInfo, d value.Datum) error {
		fmt.Printf("%s=%s\n", c.Name.O, d)
		return nil
	})
	// Output:
	// update old
	// id=7
	// name=new
}
