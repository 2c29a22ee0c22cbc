# Runs the C example and checks its exit code and the lines it must print.
execute_process(COMMAND ${EXE} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "c_example exited with ${rc}")
endif()
foreach(expected
    "page-a_0_k +present"
    "loose-key +absent"
    "log\\[2\\]: sequence gap: expected 3, got 5; index cleared"
    "bad argument: sci_index_apply_events: index is NULL"
    "keys=1 groups=0 batches_applied=3 events_applied=5 sequence_gaps=1 clears=1 last_sequence=5"
    "c example: OK")
  if(NOT out MATCHES "${expected}")
    message(FATAL_ERROR "c_example output lacks /${expected}/")
  endif()
endforeach()
