package pd

// LastRenewMs is when the keeper last sent its safe point to PD (Unix
// milliseconds, 0 before Register): the binary's metrics show the hold's
// age.
func (k *ServiceSafePoint) LastRenewMs() int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lastRenewMs
}
