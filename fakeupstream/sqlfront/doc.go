// Package sqlfront is the SQL layer of the fake upstream: a small TiDB
// front end over fakeupstream's Percolator cluster. Statements are parsed with
// TiDB's own parser; DDL writes what TiDB writes (TableInfo/DBInfo JSON under
// the meta hash keys, the schema version key, and a DDL job row in
// mysql.tidb_ddl_job that goes queueing -> running -> done, where the done
// put commits in the same transaction as the schema change, then moves to
// mysql.tidb_ddl_history); DML writes record keys and row format v2 values
// through the project's codec, so the schema store and mounter decode its
// output exactly as they would decode a real cluster's.
//
// Supported SQL and the choices made where TiDB's behaviour is richer are
// listed in specs/fakeupstream-sql.md. Anything else is rejected with an
// error naming the construct, before anything is written.
package sqlfront
