# The commit the build was made from, for `linkwidth version --json`: git's
# short hash (with "-dirty" for uncommitted changes) when building from a
# checkout, LINKWIDTH_COMMIT from the command line when given (a source
# package), else "unknown". Applies to every target defined after include().
if(NOT DEFINED LINKWIDTH_COMMIT)
  set(LINKWIDTH_COMMIT "unknown")
  find_package(Git QUIET)
  if(GIT_FOUND AND EXISTS "${CMAKE_SOURCE_DIR}/.git")
    execute_process(COMMAND "${GIT_EXECUTABLE}" describe --always --dirty --abbrev=12
                    WORKING_DIRECTORY "${CMAKE_SOURCE_DIR}"
                    OUTPUT_VARIABLE _lw_commit OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE _lw_rc ERROR_QUIET)
    if(_lw_rc EQUAL 0 AND _lw_commit)
      set(LINKWIDTH_COMMIT "${_lw_commit}")
    endif()
  endif()
endif()
add_compile_definitions(LINKWIDTH_COMMIT="${LINKWIDTH_COMMIT}")
