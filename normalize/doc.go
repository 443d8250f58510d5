// Package normalize bridges Mini-CDC callbacks (per table path) to the
// emulator's canonical contract (per collection): source partition naming,
// epochs, sequence numbers assigned after the reorder buffer, batch cutting,
// and DDL to PutCollectionSchemaRequest mapping.
package normalize
