// Package tablefilter parses and evaluates table filter rules in the
// syntax the TiDB tools and TiCDC share (`shop.*`, `shop.order_*`,
// `!shop.audit`, `*.*`), so `sfemu run --tables` takes the rules a TiCDC
// user already writes (specs/tableset.md, rules TF1-TF7).
//
// It is a pure core: parsing and matching do no I/O. The adapter resolves
// a Filter against the schema at the start ts and asks it again for each
// table a DDL creates or renames.
package tablefilter
