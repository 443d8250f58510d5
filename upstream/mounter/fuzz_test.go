package mounter

import (
	"encoding/json"

	"testing"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value/golden"
)

// FuzzMounter (rules MT1-MT13): arbitrary keys, values, old values and op
// types against real TableInfos (int handle with every column type, and a
// clustered common handle). Decode and every read path must return errors,
// never panic.
func FuzzMounter(f *testing.F) {
	tables := map[int64]*model.TableInfo{}
	for _, r := range golden.OfKind(f, captureFile, "server_table_info") {
		var rec struct {
			Meta json.RawMessage `json:"meta_value_json"`
		}
		r.Decode(f, &rec)
		ti, err := model.ParseTableInfo(rec.Meta)
		if err != nil {
			f.Fatal(err)
		}
		tables[ti.ID] = ti
	}
	for _, r := range golden.OfKind(f, captureFile, "server_row") {
		var sr serverRow
		r.Decode(f, &sr)
		f.Add(uint8(kvevent.OpTypePut), unhex(f, sr.KeyHex), unhex(f, sr.ValueHex), []byte(nil))
		f.Add(uint8(kvevent.OpTypePut), unhex(f, sr.KeyHex), unhex(f, sr.ValueHex), unhex(f, sr.ValueHex))
		f.Add(uint8(kvevent.OpTypeDelete), unhex(f, sr.KeyHex), []byte(nil), []byte(nil))
	}
	var list []*model.TableInfo
	for _, ti := range tables {
		list = append(list, ti)
	}
	m := New(Config{RequireOldValue: true})
	verifying := New(Config{VerifyChecksum: true})
	f.Fuzz(func(t *testing.T, op uint8, key, val, old []byte) {
		e := &kvevent.RawKVEntry{OpType: kvevent.OpType(op % 4), Key: key, Value: val, OldValue: old}
		if op&0x80 != 0 {
			m, verifying = verifying, m
		}
		for _, ti := range list {
			var rc RowChange
			if err := m.Decode(e, ti, &rc); err != nil {
				continue
			}
			for _, r := range []Row{rc.Row, rc.PreRow} {
				if r.IsEmpty() {
					continue
				}
				var buf []byte
				for _, ci := range ti.Columns {
					if d, err := r.Column(ci.ID); err == nil {
						buf, _ = d.AppendText(buf[:0])
					}
				}
				_, _ = r.Column(model.ExtraHandleID)
				_ = r.ForEach(func(_ *model.ColumnInfo, d value.Datum) error {
					buf, _ = d.AppendText(buf[:0])
					return nil
				})
				_, _ = r.Datums(nil)
			}
		}
	})
}
