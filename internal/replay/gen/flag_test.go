package gen

import "flag"

var full = flag.Bool("full", false, "calibrate at the paper's full size")
