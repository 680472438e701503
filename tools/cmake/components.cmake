# One CMake target per component, each compiled against the headers of the components it may use
# and no others, so the build itself refuses a wrong-way include (CMakeLists.txt, "the library").
#
# Every include names its folder from the source root ("core/tensor.h", "quant/int8.h"), so the
# source root on an include path would show every folder to every file. Instead each folder is shown
# through an include root of its own in the build tree that holds one link to it
# (build/include/view/core/core -> core/), and a target's include path holds the roots of its own
# folder and of the targets it links. A folder may see single headers of another against the order
# only where tools/scripts/layering_exceptions.txt lists them, with the reason.
#   octet_component(octet_quant quant SOURCES ${sources} USES octet_data octet_layers LIBS DNNL::dnnl)
#   octet_view(root tools/train)                      # root: an include root that shows tools/train
#   target_include_directories(octet_train PUBLIC $<BUILD_INTERFACE:${root}>)
include_guard(GLOBAL)

set(OCTET_VIEWS ${PROJECT_BINARY_DIR}/include/view)
set(OCTET_LAYERING_EXCEPTIONS ${PROJECT_SOURCE_DIR}/tools/scripts/layering_exceptions.txt)
set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${OCTET_LAYERING_EXCEPTIONS})
# Made anew at each configure, so a link left from an earlier list shows nothing. REMOVE_RECURSE
# removes the links themselves, never what they point to.
file(REMOVE_RECURSE ${OCTET_VIEWS})

# The component folder of a path from the source root, as tools/scripts/check_layering.sh names it:
# tools/train, data/fetch, else the first folder (core/cpu/gemm.h -> core).
function(octet_folder_of out path)
  if(path MATCHES "^(tools/[^/]+|data/fetch)/")
    set(${out} ${CMAKE_MATCH_1} PARENT_SCOPE)
  else()
    string(REGEX REPLACE "/.*" "" folder "${path}")
    set(${out} ${folder} PARENT_SCOPE)
  endif()
endfunction()

# Sets `out` to an include root that shows the source folder `folder` and nothing else. EXCEPT names
# sub-folders left out (components of their own: data/fetch); the folder's other entries are then
# linked one by one, and a new entry is linked at the next build (CONFIGURE_DEPENDS).
function(octet_view out folder)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "EXCEPT")
  string(REPLACE "/" "_" name ${folder})
  set(root ${OCTET_VIEWS}/${name})
  set(source ${PROJECT_SOURCE_DIR}/${folder})
  if(arg_EXCEPT)
    file(MAKE_DIRECTORY ${root}/${folder})
    file(GLOB entries LIST_DIRECTORIES true CONFIGURE_DEPENDS RELATIVE ${source} ${source}/*)
    list(REMOVE_ITEM entries ${arg_EXCEPT})
    foreach(entry IN LISTS entries)
      file(CREATE_LINK ${source}/${entry} ${root}/${folder}/${entry} SYMBOLIC)
    endforeach()
  else()
    get_filename_component(parent ${root}/${folder} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${source} ${root}/${folder} SYMBOLIC)
  endif()
  set(${out} ${root} PARENT_SCOPE)
endfunction()

# Sets `out` to an include root that shows the headers `folder` may include against the order
# (layering_exceptions.txt) and the headers of their own folders that they include in turn; empty
# when there are none.
function(octet_exception_view out folder)
  file(STRINGS ${OCTET_LAYERING_EXCEPTIONS} lines REGEX "^[^#].* -> ")
  set(todo "")
  foreach(line IN LISTS lines)
    if(NOT line MATCHES "^ *([^ ]+) -> ([^ ]+) *$")
      message(FATAL_ERROR "${OCTET_LAYERING_EXCEPTIONS}: expected \"file -> header\", got \"${line}\"")
    endif()
    set(header ${CMAKE_MATCH_2})
    octet_folder_of(from ${CMAKE_MATCH_1})
    if(from STREQUAL folder)
      list(APPEND todo ${header})
    endif()
  endforeach()
  set(shown "")
  while(todo)
    list(POP_FRONT todo header)
    if(header IN_LIST shown)
      continue()
    endif()
    list(APPEND shown ${header})
    set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
      ${PROJECT_SOURCE_DIR}/${header})
    octet_folder_of(header_folder ${header})
    get_filename_component(header_dir ${header} DIRECTORY)
    file(STRINGS ${PROJECT_SOURCE_DIR}/${header} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(include IN LISTS includes)
      string(REGEX REPLACE "^[^\"]*\"([^\"]+)\".*$" "\\1" include "${include}")
      if(NOT include MATCHES "/")
        set(include ${header_dir}/${include})  # by its name, beside the header
      endif()
      octet_folder_of(include_folder ${include})
      if(include_folder STREQUAL header_folder)
        list(APPEND todo ${include})
      endif()
    endforeach()
  endwhile()
  set(root "")
  if(shown)
    string(REPLACE "/" "_" name ${folder})
    set(root ${OCTET_VIEWS}/${name}_exceptions)
    foreach(header IN LISTS shown)
      get_filename_component(dir ${root}/${header} DIRECTORY)
      file(MAKE_DIRECTORY ${dir})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${header} ${root}/${header} SYMBOLIC)
    endforeach()
  endif()
  set(${out} ${root} PARENT_SCOPE)
endfunction()

# An OBJECT library `target` of the folder `folder`: SOURCES; USES, the targets of the folders it may
# include (linked PUBLIC, since its headers include theirs); LIBS, the libraries only its own files
# use (private); EXCEPT as octet_view. It is compiled with octet_library_flags. Its include roots are
# appended to the global property OCTET_INCLUDE_ROOTS, the library's include path.
function(octet_component target folder)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "SOURCES;USES;LIBS;EXCEPT")
  add_library(${target} OBJECT ${arg_SOURCES})
  octet_view(root ${folder} EXCEPT ${arg_EXCEPT})
  octet_exception_view(exceptions ${folder})
  set(roots ${root} ${exceptions})
  target_include_directories(${target} PUBLIC "$<BUILD_INTERFACE:${roots}>")
  target_link_libraries(${target} PUBLIC ${arg_USES} PRIVATE octet_library_flags ${arg_LIBS})
  set_property(GLOBAL APPEND PROPERTY OCTET_INCLUDE_ROOTS ${roots})
  octet_precompile(${target})
endfunction()

# With OCTET_PCH (CMakeLists.txt), `target`'s C++ files compile with the standard headers most of
# octet's files include parsed once per target, into a precompiled header. No header of octet's own:
# CMake marks the PCH a system header, which would hide their warnings, and a folder's header would
# reach files the layering keeps it from.
function(octet_precompile target)
  if(OCTET_PCH)
    # CXX only: nvcc compiles the .cu files without. ANGLE-R is the '>' a generator expression
    # cannot hold.
    set(headers "")
    foreach(h algorithm array cmath cstdint cstdio cstring functional limits map memory optional string
              string_view utility vector)
      list(APPEND headers "$<$<COMPILE_LANGUAGE:CXX>:<${h}$<ANGLE-R>>")
    endforeach()
    target_precompile_headers(${target} PRIVATE ${headers})
  endif()
endfunction()
