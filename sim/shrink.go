package sim

// Shrink finds a smaller fault schedule on which cfg still breaks the same
// invariant (SIM7): it tries removing chunks of faults, halving the chunk
// size down to single faults, and keeps every removal after which the run
// still fails the same way. The workload and every other random stream
// are unchanged (each has its own stream), so what remains is the
// smallest set of faults found that still fails. budget bounds the
// reruns. It returns the schedule and the run that failed on it.
func Shrink(cfg Config, failing *Result, budget int) (Schedule, *Result) {
	best, bestRes := append(Schedule(nil), failing.Schedule...), failing
	inv := failing.Failure.Inv
	runs := 0
	for chunk := max(1, len(best)/2); chunk >= 1 && runs < budget; chunk /= 2 {
		for i := 0; i < len(best) && runs < budget; {
			try := append(append(Schedule{}, best[:i]...), best[min(len(best), i+chunk):]...)
			c := cfg
			c.Schedule = try
			c.KeepTrace = false
			runs++
			res, err := Run(c)
			if err == nil && res.Failure != nil && res.Failure.Inv == inv {
				best, bestRes = try, res
				continue // the same i now names the next chunk
			}
			i += chunk
		}
		if chunk == 1 {
			break
		}
	}
	return best, bestRes
}
