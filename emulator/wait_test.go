package emulator

import "time"

func waitABit() { time.Sleep(time.Millisecond) }
