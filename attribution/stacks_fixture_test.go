package attribution_test

import "github.com/coldtrace/coldtrace/record"

// stackedRead is a record whose one file's 4 s of disk time were filled
// 3 s from main.py:12 load and 1 s from main.py:20 load_lora.
func stackedRead(ioNS int64) *record.Record {
	lib := record.PyFrame{File: "/venv/lib/python3.11/site-packages/safetensors/torch.py", Line: 311, Func: "load_file"}
	return &record.Record{
		WallNS: 10e9,
		Stacks: []record.PyStack{
			{Frames: []record.PyFrame{lib, {File: "/src/main.py", Line: 12, Func: "load"}, {File: "/src/main.py", Line: 40, Func: "<module>"}}},
			{Frames: []record.PyFrame{{File: "/src/main.py", Line: 20, Func: "load_lora"}, {File: "/src/main.py", Line: 41, Func: "<module>"}}},
		},
		Files: []record.File{{ID: 0, Path: "/m/model.safetensors", PagesMissed: 100, BytesFromDisk: 400 << 10, IOWaitNS: ioNS, MissCPUNS: 1e9,
			Stacks: []record.StackCharge{{Stack: 1, PID: 7, NS: ioNS, Bytes: 300 << 10}, {Stack: 2, PID: 7, NS: 1e9, Bytes: 100 << 10}}}},
		Samples: []record.Sample{{EndNS: 10e9, Files: []record.FileDelta{{File: 0, PagesMissed: 100, IOWaitNS: ioNS, MissCPUNS: 1e9}},
			Threads: []record.ThreadDelta{{TID: 7, PID: 7, IOWaitNS: ioNS, MissCPUNS: 1e9, CPUNS: 1e9}}}},
		Processes: []record.Process{{PID: 7, Comm: "python3", EndNS: 10e9}},
	}
}
