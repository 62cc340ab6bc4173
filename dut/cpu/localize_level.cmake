# cmake -DLD= -DOBJCOPY= -DNM= -DKEEP=prefix -DOUT=file.o -DOBJECTS=a.o|b.o -P localize_level.cmake
#
# Links one instruction-set level's objects into OUT (ld -r, section groups dissolved, so the final
# link cannot trade this level's copy of a template for another object's) and makes every symbol it
# defines local but those starting with KEEP (its entry points). Fails if anything else stays global.
foreach(var LD OBJCOPY NM KEEP OUT OBJECTS)
  if(NOT ${var})
    message(FATAL_ERROR "localize_level.cmake: -D${var}= is required")
  endif()
endforeach()
string(REPLACE "|" ";" objects "${OBJECTS}")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "localize_level.cmake: '${ARGN}' failed (${rc}): ${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

run(${LD} -r --force-group-allocation -o ${OUT}.linked ${objects})
run(${OBJCOPY} --wildcard --keep-global-symbol=${KEEP}* ${OUT}.linked ${OUT}.localized)
file(REMOVE ${OUT}.linked)

# What a later link could still bind to: defined symbols that are global, weak or unique.
run(${NM} --defined-only --extern-only ${OUT}.localized)
string(REPLACE "\n" ";" lines "${run_output}")
set(entries 0)
foreach(line IN LISTS lines)
  if(line STREQUAL "")
    continue()
  endif()
  string(REGEX REPLACE "^.* " "" name "${line}")
  string(FIND "${name}" "${KEEP}" at)
  if(NOT at EQUAL 0)
    file(REMOVE ${OUT}.localized)
    message(FATAL_ERROR "localize_level.cmake: '${line}' is still global in ${OUT}; only ${KEEP}* may be. "
                        "Two levels' copies of it could be merged by the linker.")
  endif()
  math(EXPR entries "${entries} + 1")
endforeach()
if(entries EQUAL 0)
  file(REMOVE ${OUT}.localized)
  message(FATAL_ERROR "localize_level.cmake: no entry point ${KEEP}* in ${OBJECTS}")
endif()
file(RENAME ${OUT}.localized ${OUT})
