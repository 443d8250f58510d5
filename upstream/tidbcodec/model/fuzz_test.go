package model

import "testing"

func FuzzParseJob(f *testing.F) {
	for _, rec := range goldenRecords(f, "tidb-golden.jsonl", "model_job") {
		f.Add([]byte(rec["history_json"]))
	}
	f.Add([]byte(`{"id":1,"binlog":{"TableInfo":{"cols":[{"type":{"Tp":3}}]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := ParseJob(data)
		if err == nil && j.BinlogInfo != nil && j.BinlogInfo.TableInfo != nil {
			ti := j.BinlogInfo.TableInfo
			_, _ = ti.HandleColumns()
			_ = ti.PhysicalIDs()
			for _, c := range ti.Columns {
				if c != nil {
					_ = ti.ColumnByID(c.ID)
				}
			}
			_ = j.String()
		}
	})
}

func FuzzParseTableInfo(f *testing.F) {
	for _, rec := range goldenRecords(f, "tidb-golden.jsonl", "model_table_info") {
		f.Add([]byte(rec["json"]))
	}
	f.Add([]byte(`{"pk_is_handle":true,"cols":[null]}`))
	f.Add([]byte(`{"is_common_handle":true,"index_info":[{"is_primary":true,"idx_cols":[null]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ti, err := ParseTableInfo(data)
		if err != nil {
			return
		}
		_, _ = ti.HandleColumns()
		_ = ti.PhysicalIDs()
		_ = ti.ColumnByID(1)
		_ = ti.ColumnByName("a")
		_ = ti.IsView()
		_ = ti.Clone()
	})
}
